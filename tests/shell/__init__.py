"""The shell helpers every front end shares (`sqsbatch/_shell`)."""
