"""Tasks: a causal method run over a set of prompt pairs instead of one (`PromptSet`), each head's mean with
its bootstrap interval and, for patching, a sign-flip permutation p-value (docs/attribution.md, *Tasks*)."""
