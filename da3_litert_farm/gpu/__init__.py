"""LiteRT's GPU accelerator: running a model on it, its set-up (Mesa's software Vulkan driver
where there is no GPU), the host lock that keeps one GPU check per machine, load-cost measurement."""
