"""albert_tf.models."""
