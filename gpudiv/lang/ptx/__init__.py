"""The ptx dialect: parse, lower and print."""
