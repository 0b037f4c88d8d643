"""Pure-JAX + optax implementation of ``transformer_lm`` (:mod:`.transformer`)."""
