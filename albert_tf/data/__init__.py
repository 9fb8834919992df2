"""albert_tf.data."""
