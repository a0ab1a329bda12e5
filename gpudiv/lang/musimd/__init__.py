"""The musimd dialect: parse, lower and print."""
