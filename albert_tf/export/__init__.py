"""albert_tf.export."""
