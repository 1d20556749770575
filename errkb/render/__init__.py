"""Rendering reports for people and tools."""
