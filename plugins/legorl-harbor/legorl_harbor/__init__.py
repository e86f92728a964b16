"""lego-rl plugins on Harbor: the ``harbor`` sandbox and a Docker-free bubblewrap environment."""
