"""Diagrams and figures the book draws (one module per picture family, named for what it draws)."""
