"""What every front end shares and that touches the OS: threads, signals, files, clocks,
botocore."""
