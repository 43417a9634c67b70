"""Atlas stage: the theory's verdicts beside training over many languages. `languages` builds named,
reproducible language sets (MLRegTest, generated families, the registry, user lists); `generate`
draws random languages of a chosen logic class."""
