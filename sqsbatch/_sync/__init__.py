"""The threads flavour: `door.py` and `consumer.py` are generated from `sqsbatch._async`'s by
unasync (`make twins`); `flavour.py` is written by hand."""
