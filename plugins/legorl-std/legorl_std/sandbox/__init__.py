"""The local sandbox: bubblewrap, overlays, limits, pristine verification."""
