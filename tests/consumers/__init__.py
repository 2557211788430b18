"""The long-running pollers and the producers (`sqsbatch/_async`, `sqsbatch/_sync`)."""
