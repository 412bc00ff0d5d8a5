"""tokenplane.sim"""
