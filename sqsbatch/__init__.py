"""sqsbatch."""
