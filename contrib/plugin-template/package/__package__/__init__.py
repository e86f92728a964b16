"""lego-rl {{kind}} plugin ``{{name}}``; registered by :mod:`{{package}}.plugin`."""
