"""Reading logs: decoding, prefixes, tracebacks and chains, embedded messages, regions."""
