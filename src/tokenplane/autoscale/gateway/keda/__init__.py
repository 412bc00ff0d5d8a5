"""The KEDA actuator: tokenplane serves KEDA's external scaler gRPC protocol
(``externalscaler.proto``, vendored in ``proto/``) so a ScaledObject with an
``external`` trigger scales a pool's engine Deployment on tokenplane's decision
(docs/KEDA.md)."""
