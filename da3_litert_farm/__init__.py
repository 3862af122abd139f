"""DA3-SMALL LiteRT build farm: the library the stages/ modules run (see README: Layout)."""
