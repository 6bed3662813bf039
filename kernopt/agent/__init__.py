"""Policies (who proposes candidates) and search (which candidates get evaluated)."""
