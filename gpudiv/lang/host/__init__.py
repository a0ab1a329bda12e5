"""The host dialect: parse, lower and print."""
