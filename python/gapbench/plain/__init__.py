"""Plain loops: the textbook way to time the same thing the harness times, with nothing of the
harness in them. The harness runs them in the same session and reports the ratio."""
