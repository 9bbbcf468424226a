"""Task types: the registry (@task, TaskContext, the errors a handler raises), the built-ins and
the http task, and the loader that imports them with the configured task modules."""
