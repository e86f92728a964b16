"""lego-rl sandbox plugin ``docker``; registered by :mod:`legorl_docker.plugin`."""
