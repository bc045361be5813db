"""perflearn.learn"""
