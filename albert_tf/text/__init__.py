"""albert_tf.text."""
