"""albert_tf.convert."""
