"""Tools for dataset maintainers: lint a dataset version, extract draft records from source."""
