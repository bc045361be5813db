"""perflearn.wire"""
