"""tokenplane.routing"""
