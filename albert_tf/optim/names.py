"""The optimizer names `create_optimizer` accepts, in a module without TensorFlow: the scripts
declare their --optimizer flags from it before TensorFlow loads.

>>> OPTIMIZERS
('adamw', 'adamw_original', 'lamb')
"""

# The names `create_optimizer` (and the scripts' --optimizer) accept.
OPTIMIZERS = ("adamw", "adamw_original", "lamb")
