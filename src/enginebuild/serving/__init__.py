"""Serving one image on several nodes (see usecases/serving.py)."""
