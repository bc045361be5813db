"""perflearn.learn: performance models, evaluation, recommendations, rules, clusters, knees.

    from perflearn.learn import fit, load
    model = fit(dataset, "PERF", family="auto")      # a Model: pipeline + schema + CV scores
    model.save("perf.model"); model = load("perf.model")
    model.predict(points) / model.predict_dist(points)  # with an uncertainty band

Submodules: ``models`` (families, AutoRegressor), ``evaluate``, ``recommend``,
``rules``, ``cluster``, ``knee`` (kneedle), ``metrics``.
"""

from .features import FeatureSchema, TrainingData, training_data
from .model import Model, fit, fit_data, load
from .models import FAMILIES, AutoRegressor

__all__ = [
    "FAMILIES",
    "AutoRegressor",
    "FeatureSchema",
    "Model",
    "TrainingData",
    "fit",
    "fit_data",
    "load",
    "training_data",
]
