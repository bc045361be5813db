"""perflearn.detect"""
