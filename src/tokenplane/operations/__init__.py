"""tokenplane.operations: the endpoint kinds (one :class:`~.base.Operation` each) and
their registry by path (:func:`~.registry.standard_operations`), with the body
validation they share (:mod:`.validate`). Imports nothing from the HTTP, pipeline,
metadata or upstream layers; the pipeline and the simulated engine import it."""
