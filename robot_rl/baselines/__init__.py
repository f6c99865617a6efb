"""Classical baselines to compare learned policies with."""
