"""Drop-in replacements for other queue libraries' APIs, on memq.

``memq.compat.rst_queue``: rst_queue 0.1.6's ``AsyncQueue``, ``AsyncPersistenceQueue``,
``ExecutionMode``, ``QueueStats`` and ``ProcessedResult``.
"""
