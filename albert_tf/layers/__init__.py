"""albert_tf.layers."""
