"""tokenplane.metering"""
