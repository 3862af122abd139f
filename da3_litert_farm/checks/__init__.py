"""What a shipped file must pass: agreement figures, CPU fidelity, GPU lint and tensor plan,
letterbox penalty, the GPU accelerator check, the bundle's gates, and the sha256 binding between them."""
