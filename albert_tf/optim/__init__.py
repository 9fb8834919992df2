"""albert_tf.optim."""
