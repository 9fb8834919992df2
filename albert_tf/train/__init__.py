"""albert_tf.train."""
