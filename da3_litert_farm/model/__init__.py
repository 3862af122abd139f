"""The model: the official DA3 loading, weights (Hub layout, stress weights), the GPU-clean
monocular-depth module and its exact rewrites, the patch step, the photos as model input."""
