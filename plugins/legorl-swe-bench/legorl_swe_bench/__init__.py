"""SWE-bench for lego-rl: instances as Harbor tasks (``tasks: swe-bench``) and grading with
the ``swebench`` package's own log parsers (``verifier: swe-bench``)."""
