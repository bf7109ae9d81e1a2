"""The versions of cclbench and of its JSON schemas."""
SCHEMA_VERSION = "1.0.0"
TOOL_VERSION = "0.1.0"
