"""Matching: record templates, RE2 pattern compilation, the candidate index, and deciding."""
