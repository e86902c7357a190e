"""The campaign runner: Hydra config, Ray orchestration, evaluation, results and findings.

Only this package imports Ray, and only `campaign.driver` (a package) does so: workers are plain
classes.
"""
