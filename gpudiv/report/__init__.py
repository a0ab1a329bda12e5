"""The report stage: analysis and check results as documents for people and tools
(text, JSON, SARIF, HTML, DOT), fact export, corpus runs and rule experiments."""
