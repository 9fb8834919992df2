"""The one base class of the errors that are the user's to fix (a bad flag, file, line or
setting). Scripts print such an error as one line on stderr and exit with code 1; anything else
is a bug and keeps its traceback.

>>> from albert_tf.errors import UserError
>>> from albert_tf.data.task_spec import DataError
>>> issubclass(DataError, UserError) and issubclass(DataError, ValueError)
True
"""


class UserError(Exception):
    """An expected error: the message names the flag, file or line to fix."""
