"""tokenplane.pipeline"""
